//! What a task is given and what it gives back (the protocol's task result
//! and `fettle/taskEvent`, minus the LSP framing).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{AgentConfig, CommandPolicy, UnsavedBuffers};

/// The goal used when the user names none.
pub const DEFAULT_GOAL: &str = "make the tests pass";
/// Ends the goals of the fix-diagnostics commands. A compact prompt has no
/// `diagnostics` tool (its first message lists the errors), so the task
/// message leaves it out there.
pub const SEE_DIAGNOSTICS: &str = "Call `diagnostics` to see them.";

#[derive(Clone, Debug)]
pub struct TaskSpec {
    pub id: String,
    pub goal: String,
    /// The workspace root (canonical).
    pub root: PathBuf,
    /// The file (and 1-based line range) the user pointed at, if any.
    pub focus: Option<Focus>,
    /// The test command (configured or detected); `None`: syntax checks only.
    pub test_command: Option<String>,
    pub budget: Budget,
    pub command_policy: CommandPolicy,
    pub allow_env: Vec<String>,
    /// `agent.protected_paths`: refused to file tools, beyond the built-ins.
    pub protected_paths: Vec<String>,
    /// `agent.allow_hardlinks`: file tools may use files with several links.
    pub allow_hardlinks: bool,
    pub test_timeout: Duration,
    pub command_timeout: Duration,
    /// Resource limits for tests and commands.
    pub limits: crate::agent::exec::Limits,
    /// The Landlock policy for tests and commands (`agent.sandbox`).
    pub sandbox: Option<crate::agent::sandbox::SandboxPolicy>,
    /// A file to write is open in the editor with unsaved changes: ask,
    /// save them first, or leave the file alone (`agent.unsaved_buffers`).
    pub unsaved_buffers: UnsavedBuffers,
    /// The project's checkers (`[check]`, detected or configured); empty:
    /// none, or `check.enabled = false`.
    pub checkers: Vec<crate::agent::checkers::Checker>,
    /// Limit for one checker run (`check.timeout_s`).
    pub check_timeout: Duration,
    /// What the checkers must report for the task to succeed.
    pub check_goal: CheckGoal,
    /// `agent.prompt`: the compact prompt for small models, or the full one.
    pub prompt: crate::config::AgentPrompt,
    /// `agent.candidates`: candidate fixes per attempt (1: none drafted
    /// side by side).
    pub candidates: u32,
    /// `agent.mutants`: with candidates, mechanical changes tried first.
    pub mutants: bool,
    /// `agent.review`: a review before success.
    pub review: bool,
    /// A stack trace the user gave (`fettle fix --trace FILE`).
    pub trace: Option<String>,
    /// The earlier requests of the conversation this one continues
    /// (`agent::conversation`), as the first message tells them.
    pub history: Option<String>,
    /// Bisect the git history when the tests fail (`--since`, `--bisect`,
    /// `agent.bisect`).
    pub bisect: Option<BisectRequest>,
    /// Write tests for the goal first (`--tests-first`, `agent.tests_first`).
    pub tests_first: bool,
    /// Plan first (`--plan`, `agent.plan`), and ask the user to approve it
    /// (`agent.plan_approval`).
    pub plan: bool,
    pub plan_approval: bool,
    /// Trace the failing Python tests to rank the suspects
    /// (`agent.coverage`).
    pub coverage: bool,
}

/// Where a bisection starts.
#[derive(Clone, Debug, Default)]
pub struct BisectRequest {
    /// A commit where the tests pass; `None`: walk back to one.
    pub since: Option<String>,
}

/// What the checkers must report for a task to succeed (besides passing
/// tests and no syntax errors).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CheckGoal {
    /// No more errors than before the task: errors it did not cause are
    /// not its job, but it may not add any.
    #[default]
    NoNewErrors,
    /// No errors at all (`fettle fix --check`).
    Clean,
    /// No errors in this file, and none new elsewhere
    /// (`fettle.fixDiagnostics` on a file).
    CleanFile(PathBuf),
}

impl TaskSpec {
    /// A task with the limits and policies of `config`.
    pub fn from_config(id: String, goal: String, root: PathBuf, config: &AgentConfig) -> Self {
        Self {
            id,
            goal,
            root,
            focus: None,
            test_command: None,
            budget: Budget {
                max_iterations: config.max_iterations,
                max_tool_calls: config.max_tool_calls,
                max_tokens: config.max_tokens,
                timeout: Duration::from_secs(config.timeout_s),
            },
            command_policy: config.commands,
            allow_env: config.allow_env.clone(),
            protected_paths: config.protected_paths.clone(),
            allow_hardlinks: config.allow_hardlinks,
            test_timeout: Duration::from_secs(config.test_timeout_s),
            command_timeout: Duration::from_secs(config.command_timeout_s),
            limits: crate::agent::exec::Limits::for_agent(config),
            sandbox: None,
            unsaved_buffers: config.unsaved_buffers,
            checkers: Vec::new(),
            check_timeout: Duration::from_secs(300),
            check_goal: CheckGoal::NoNewErrors,
            prompt: config.prompt,
            candidates: config.candidates.clamp(1, crate::config::MAX_CANDIDATES),
            mutants: config.mutants,
            review: config.review,
            trace: None,
            history: None,
            bisect: config.bisect.then(BisectRequest::default),
            tests_first: config.tests_first,
            plan: config.plan,
            plan_approval: config.plan_approval,
            coverage: config.coverage,
        }
    }

    /// True when the goal is only "make the tests pass" (so passing tests
    /// at the start mean there is nothing to do).
    pub fn goal_is_tests(&self) -> bool {
        self.goal.trim().eq_ignore_ascii_case(DEFAULT_GOAL)
    }

    /// True when passing verification at the start means there is nothing
    /// to do: the goal is the tests, or the checkers' errors.
    pub fn nothing_to_do_when_passing(&self) -> bool {
        self.goal_is_tests() || self.check_goal != CheckGoal::NoNewErrors
    }

    /// True when the goal asks a question rather than for a change ("why
    /// does test_total fail?", "explain what you changed"): an answer in
    /// words then ends the task, and code in it is an example, not an edit.
    /// A request phrased as a question ("can you make total sum them?") is
    /// a request.
    pub fn asks_a_question(&self) -> bool {
        asks_a_question(&self.goal)
    }
}

fn asks_a_question(goal: &str) -> bool {
    let goal = goal.trim().to_lowercase();
    let words: Vec<&str> = goal
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '_'))
        .filter(|w| !w.is_empty())
        // A follow-up's opening word ("now explain what you changed", "ok,
        // why …") says nothing of what is asked.
        .skip_while(|w| matches!(*w, "now" | "so" | "ok" | "okay" | "then" | "and" | "also"))
        .take(4)
        .collect();
    let word = |i: usize| words.get(i).copied().unwrap_or_default();
    // "can you explain …", "please describe …": asked to tell, not to change.
    if matches!(word(0), "can" | "could" | "would" | "will" | "please") {
        return words
            .iter()
            .any(|w| matches!(*w, "explain" | "describe" | "tell"));
    }
    if word(0) == "how" && word(1) == "about" {
        return false;
    }
    let interrogative = matches!(
        word(0),
        "why"
            | "what"
            | "what's"
            | "how"
            | "where"
            | "which"
            | "who"
            | "when"
            | "explain"
            | "describe"
            | "summarize"
            | "summarise"
    );
    let yes_no = matches!(word(0), "is" | "are" | "does" | "do" | "did") && word(1) != "not";
    interrogative || yes_no || goal.ends_with('?')
}

#[derive(Clone, Debug)]
pub struct Focus {
    pub path: PathBuf,
    /// 1-based, inclusive.
    pub lines: Option<(u32, u32)>,
}

#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub max_iterations: u32,
    pub max_tool_calls: u32,
    pub max_tokens: u64,
    pub timeout: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Success,
    GaveUp,
    Cancelled,
    Failed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Success => "success",
            TaskStatus::GaveUp => "gave_up",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Failed => "failed",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
}

impl Tokens {
    pub fn total(&self) -> u64 {
        self.input + self.output
    }
}

/// The task's outcome. `changed_files` are absolute paths; the entry points
/// render them (as URIs over LSP).
#[derive(Clone, Debug)]
pub struct TaskResult {
    pub task_id: String,
    pub status: TaskStatus,
    pub summary: String,
    pub changed_files: Vec<PathBuf>,
    pub diff: String,
    pub iterations: u32,
    pub tool_calls: u32,
    pub tokens: Tokens,
    pub elapsed_ms: u64,
    /// Open editor buffers the user must look at after the task (buffer and
    /// disk differ, the editor did not save, or a file was left alone).
    pub editor_notes: Vec<EditorNote>,
    /// With `agent.candidates` > 1: each candidate drafted, its verdict
    /// and whether it was chosen.
    pub candidates: Vec<Value>,
    /// With `agent.review`: each verdict (`{"iteration", "by", "approved",
    /// "reasons"}`).
    pub review: Vec<Value>,
    /// With a bisection: what it found (`{"firstBad", "subject", "good",
    /// "steps"}`, `{"uncommitted"}`, `{"noGoodCommit"}` or `{"error"}`).
    pub bisect: Option<Value>,
    /// With `--tests-first`: the test files written before the code.
    pub tests_written: Vec<String>,
    /// With a plan: `{"steps", "revisions"}`.
    pub plan: Option<Value>,
    /// Where the fault may be, most likely first (`{"name", "path",
    /// "lines", "why"}`), when the tests failed at the start.
    pub suspects: Vec<Value>,
    /// The traced test run (`agent.coverage`): `{"failingTests",
    /// "passingTests", "seconds", "testRunSeconds"}`, or `{"none": why,
    /// "seconds"}`; absent when it did not apply.
    pub coverage: Option<Value>,
}

/// One file the user must look at in the editor after a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditorNote {
    pub path: PathBuf,
    /// `unsynced` (buffer and disk differ), `not_saved_by_editor` (same
    /// text, but Fettle wrote the disk itself) or `left_alone`.
    pub kind: &'static str,
    /// What happened and what to do, for the user.
    pub message: String,
}

impl TaskResult {
    /// A task that could not start: nothing done, `summary` says why.
    pub fn failed(task_id: &str, summary: impl Into<String>) -> Self {
        Self {
            task_id: task_id.to_owned(),
            status: TaskStatus::Failed,
            summary: summary.into(),
            changed_files: Vec::new(),
            diff: String::new(),
            iterations: 0,
            tool_calls: 0,
            tokens: Tokens::default(),
            elapsed_ms: 0,
            editor_notes: Vec::new(),
            candidates: Vec::new(),
            review: Vec::new(),
            bisect: None,
            tests_written: Vec::new(),
            plan: None,
            suspects: Vec::new(),
            coverage: None,
        }
    }

    /// The protocol's JSON shape, with `uri` rendering each changed file.
    pub fn to_json(&self, uri: impl Fn(&std::path::Path) -> String) -> Value {
        let mut json = serde_json::json!({
            "taskId": self.task_id,
            "status": self.status.as_str(),
            "summary": self.summary,
            "changedFiles": self.changed_files.iter().map(|p| uri(p)).collect::<Vec<_>>(),
            "diff": self.diff,
            "iterations": self.iterations,
            "toolCalls": self.tool_calls,
            "tokens": self.tokens,
            "elapsedMs": self.elapsed_ms,
            "editorNotes": self.editor_notes.iter().map(|n| serde_json::json!({
                "uri": uri(&n.path), "kind": n.kind, "message": n.message,
            })).collect::<Vec<_>>(),
        });
        if !self.candidates.is_empty() {
            json["candidates"] = Value::Array(self.candidates.clone());
        }
        if !self.review.is_empty() {
            json["review"] = Value::Array(self.review.clone());
        }
        if let Some(bisect) = &self.bisect {
            json["bisect"] = bisect.clone();
        }
        if let Some(plan) = &self.plan {
            json["plan"] = plan.clone();
        }
        if !self.tests_written.is_empty() {
            json["testsWritten"] = serde_json::json!(self.tests_written);
        }
        if !self.suspects.is_empty() {
            json["suspects"] = Value::Array(self.suspects.clone());
        }
        if let Some(coverage) = &self.coverage {
            json["coverage"] = coverage.clone();
        }
        json
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Text,
    ToolCall,
    ToolResult,
    Edit,
    Verify,
    Status,
}

/// One `fettle/taskEvent`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskEvent {
    pub task_id: String,
    pub kind: EventKind,
    pub text: String,
    pub data: Value,
}

#[cfg(test)]
mod question_tests {
    use super::asks_a_question;

    #[test]
    fn questions_and_requests() {
        for question in [
            "why does test_total fail?",
            "Explain what you changed",
            "what does merge do",
            "does total handle an empty list?",
            "can you explain the change?",
            "the loop in parse: is it right?",
            "now explain what you changed",
            "OK, why did that work",
            "summarize what parse does",
        ] {
            assert!(asks_a_question(question), "{question}");
        }
        for request in [
            "make the tests pass",
            "can you make total() sum the items?",
            "please fix the off-by-one",
            "how about a dict instead of the if-chain",
            "do not change the tests; fix total",
            "is_even returns the wrong answer for 0",
            "now also handle the empty list",
        ] {
            assert!(!asks_a_question(request), "{request}");
        }
    }
}

//! `[agent]`: the repair loop — its model, budgets, commands, sandbox and
//! strategies.

use serde::{Deserialize, Serialize};

use super::{AgentPrompt, CommandPolicy, SandboxMode, UnsavedBuffers, BUILTIN_MODEL};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentConfig {
    pub model: String,
    /// Empty means auto-detect.
    pub test_command: String,
    pub max_iterations: u32,
    pub max_tool_calls: u32,
    pub max_tokens: u64,
    pub timeout_s: u64,
    /// Policy for commands other than the test command.
    pub commands: CommandPolicy,
    /// Limit for one run of the test command; its whole process group is killed after it.
    pub test_timeout_s: u64,
    /// Limit for one `run_command`.
    pub command_timeout_s: u64,
    /// Environment variables passed to tests and commands although their
    /// names look secret (contain KEY, TOKEN, SECRET or PASSWORD).
    pub allow_env: Vec<String>,
    /// Address-space limit for tests and commands, in MiB; 0: no limit.
    pub memory_limit_mb: u64,
    /// How tests and commands are sandboxed: `auto` (the strongest the
    /// system supports), `workspace` (require it) or `off`.
    pub sandbox: SandboxMode,
    /// More directories sandboxed commands may write to.
    pub sandbox_writable: Vec<String>,
    /// Whether sandboxed tests and commands may use the network.
    pub sandbox_network: bool,
    /// Workspace-relative paths (a trailing `/` for a directory) that file
    /// tools refuse to write and commands see read-only, beyond the
    /// built-in ones (`.git/`, `fettle.toml`, `.fettle/`, the test command's
    /// script).
    pub protected_paths: Vec<String>,
    /// Whether file tools may read or write a regular file with more than
    /// one hard link (its other name may be outside the workspace).
    pub allow_hardlinks: bool,
    /// What the agent does when a file it needs to change is open in the
    /// editor with unsaved changes.
    pub unsaved_buffers: UnsavedBuffers,
    /// The prompt the model gets: `compact` (made for a small model:
    /// short, three tools, each attempt afresh), `full`, or `auto`
    /// (compact for a `local` model).
    pub prompt: AgentPrompt,
    /// Candidate fixes drafted per attempt, each verified in its own copy
    /// of the workspace, the best applied; 1: a single line of attempts.
    pub candidates: u32,
    /// With candidates: before the model's, try small mechanical changes
    /// to the suspected functions (an operator, a literal, two arguments,
    /// a name), each tested in a copy; the first that passes is applied.
    pub mutants: bool,
    /// Before a task reports success, a reviewer reads the change, the
    /// goal and the test results and may reject it (one more round).
    pub review: bool,
    /// The reviewer's model; empty: the agent's own.
    pub review_model: String,
    /// When the tests fail before any change, bisect the git history for
    /// the commit that broke them.
    pub bisect: bool,
    /// Before changing code for a goal, write tests for it that fail, then
    /// make them pass.
    pub tests_first: bool,
    /// Plan first: a short numbered plan before the first attempt, revised
    /// after a failed one.
    pub plan: bool,
    /// Ask the user to approve the plan before any change.
    pub plan_approval: bool,
    /// When Python tests fail before any change, run them once more
    /// recording the functions each test runs, to rank where the fault is.
    pub coverage: bool,
}
impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            model: BUILTIN_MODEL.to_string(),
            test_command: String::new(),
            max_iterations: 8,
            max_tool_calls: 60,
            max_tokens: 200_000,
            timeout_s: 900,
            commands: CommandPolicy::Ask,
            test_timeout_s: 600,
            command_timeout_s: 120,
            allow_env: Vec::new(),
            memory_limit_mb: 8192,
            sandbox: SandboxMode::Auto,
            sandbox_writable: Vec::new(),
            sandbox_network: false,
            protected_paths: Vec::new(),
            allow_hardlinks: false,
            unsaved_buffers: UnsavedBuffers::Ask,
            prompt: AgentPrompt::Auto,
            candidates: 1,
            mutants: true,
            review: false,
            review_model: String::new(),
            bisect: false,
            tests_first: false,
            plan: false,
            plan_approval: false,
            coverage: true,
        }
    }
}

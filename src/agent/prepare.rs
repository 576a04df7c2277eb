//! One task setup for both front ends (`fettle.chat`/`fettle.fixDiagnostics`
//! in the editor, `fettle fix` in a terminal): the spec from the
//! configuration, which test command verifies the work, the sandbox policy
//! and the checkpoint store. The front ends keep only how they tell the
//! user (`showMessage` or stderr) and what they add (focus, approvals).

use std::path::PathBuf;

use super::checkpoint::CheckpointStore;
use super::verify::detect_test_command;
use super::TaskSpec;
use crate::config::AgentConfig;

/// What the caller asked for beyond the configuration (`fettle fix --test`,
/// `--max-iterations`).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub test_command: Option<String>,
    pub max_iterations: Option<u32>,
}

/// Things worth telling the user while the task is set up, in the order
/// they happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// No test command was given or configured; one was found.
    TestCommandDetected { command: String, reason: String },
    /// None given, configured or found: only syntax is verified.
    NoTestCommand,
    /// The sandbox falls back to something weaker (once per process).
    Sandbox(String),
}

/// A task ready for `run_task`.
pub struct Prepared {
    pub spec: TaskSpec,
    pub store: CheckpointStore,
}

/// Sets up task `id` in `root`. `notice` hears each [`Notice`] as it
/// happens; the error is the message to show (the sandbox asked for cannot
/// be had, or the checkpoint directory cannot be created).
pub fn prepare(
    id: String,
    goal: String,
    root: PathBuf,
    config: &AgentConfig,
    overrides: &Overrides,
    notice: &mut dyn FnMut(Notice),
) -> Result<Prepared, String> {
    let mut spec = TaskSpec::from_config(id, goal, root.clone(), config);
    if let Some(n) = overrides.max_iterations {
        spec.budget.max_iterations = n;
    }
    let given = overrides
        .test_command
        .clone()
        .filter(|t| !t.trim().is_empty());
    spec.test_command = match given {
        Some(command) => Some(command),
        None if !config.test_command.trim().is_empty() => Some(config.test_command.clone()),
        None => match detect_test_command(&root) {
            Some(found) => {
                notice(Notice::TestCommandDetected {
                    command: found.command.clone(),
                    reason: found.reason,
                });
                Some(found.command)
            }
            None => {
                notice(Notice::NoTestCommand);
                None
            }
        },
    };
    let sandbox = super::sandbox::from_config(config, &root, spec.test_command.as_deref())?;
    if let Some(text) = sandbox.notice {
        notice(Notice::Sandbox(text));
    }
    spec.sandbox = Some(sandbox.policy);
    let store = CheckpointStore::for_workspace(&root)
        .map_err(|err| format!("cannot create the checkpoint directory: {err}"))?;
    Ok(Prepared { spec, store })
}

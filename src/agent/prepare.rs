//! One task setup for both front ends (`fettle.chat`/`fettle.fixDiagnostics`
//! in the editor, `fettle fix` in a terminal): the spec from the
//! configuration, which test command verifies the work, the sandbox policy
//! and the checkpoint store. The front ends keep only how they tell the
//! user (`showMessage` or stderr) and what they add (focus, approvals).

use std::path::PathBuf;

use super::checkpoint::CheckpointStore;
use super::verify::detect_test_command;
use super::{CheckGoal, TaskSpec};
use crate::config::Config;

/// What the caller asked for beyond the configuration (`fettle fix --test`,
/// `--max-iterations`, `--check`).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub test_command: Option<String>,
    pub max_iterations: Option<u32>,
    /// `--candidates N`.
    pub candidates: Option<u32>,
    /// `--no-mutants`.
    pub no_mutants: bool,
    /// `--review`.
    pub review: bool,
    /// `--tests-first`.
    pub tests_first: bool,
    /// `--plan`.
    pub plan: bool,
    /// `--since REV` / `--bisect`.
    pub bisect: Option<crate::agent::types::BisectRequest>,
    /// What the checkers must report (default: no new errors).
    pub check_goal: Option<CheckGoal>,
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
    /// The checkers that will verify the work: `rust: cargo check …`.
    Checkers(Vec<String>),
    /// A language of the project has no checker installed (once per
    /// process and language).
    CheckerMissing(String),
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
    full: &Config,
    overrides: &Overrides,
    notice: &mut dyn FnMut(Notice),
) -> Result<Prepared, String> {
    let config = &full.agent;
    let mut spec = TaskSpec::from_config(id, goal, root.clone(), config);
    if let Some(n) = overrides.max_iterations {
        spec.budget.max_iterations = n;
    }
    spec.review |= overrides.review;
    spec.mutants &= !overrides.no_mutants;
    spec.tests_first |= overrides.tests_first;
    spec.plan |= overrides.plan;
    if let Some(bisect) = &overrides.bisect {
        spec.bisect = Some(bisect.clone());
    }
    if let Some(n) = overrides.candidates {
        spec.candidates = n.clamp(1, crate::config::MAX_CANDIDATES);
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
    spec.check_goal = overrides.check_goal.clone().unwrap_or_default();
    spec.check_timeout = std::time::Duration::from_secs(full.check.timeout_s);
    if full.check.enabled || spec.check_goal != CheckGoal::NoNewErrors {
        let hint: Vec<PathBuf> = match &spec.check_goal {
            CheckGoal::CleanFile(path) => vec![path.clone()],
            _ => Vec::new(),
        };
        let detected = super::checkers::detect(&root, &full.check, &hint, None);
        for missing in &detected.missing {
            if missing.first_report() {
                notice(Notice::CheckerMissing(missing.message()));
            }
        }
        if !detected.checkers.is_empty() {
            notice(Notice::Checkers(
                detected
                    .checkers
                    .iter()
                    .map(|c| format!("{}: `{}`", c.language, c.command))
                    .collect(),
            ));
        }
        spec.checkers = detected.checkers;
    }
    if spec.checkers.is_empty() {
        // Nothing to measure errors with: the goal falls back to syntax and
        // tests (`fettle fix --check` refuses to start instead).
        spec.check_goal = CheckGoal::NoNewErrors;
    }
    let sandbox = super::sandbox::from_config(config, &root, spec.test_command.as_deref())?;
    if let Some(text) = sandbox.notice {
        notice(Notice::Sandbox(text));
    }
    spec.sandbox = Some(sandbox.policy);
    let store = CheckpointStore::for_workspace(&root)
        .map_err(|err| format!("cannot create the checkpoint directory: {err}"))?;
    Ok(Prepared { spec, store })
}

/// The reviewer's own model when a review is `wanted` and
/// `agent.review_model` names another than the agent's.
pub fn reviewer_model(
    config: &crate::config::Config,
    models: &crate::model::Models,
    wanted: bool,
) -> Result<Option<crate::model::Model>, String> {
    let name = &config.agent.review_model;
    if !wanted || name.is_empty() || *name == config.agent.model {
        return Ok(None);
    }
    models
        .get_background(name)
        .map(Some)
        .map_err(|err| format!("the reviewer's model `{name}` cannot be used: {err}"))
}

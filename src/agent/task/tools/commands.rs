//! The tools that run something: the checkers' diagnostics, the tests,
//! a command — each in the sandbox, its output shaped for the model.

use std::path::{Path, PathBuf};

use super::super::explain::StopCause;
use super::super::{prompt, Task};
use super::schema::{parse, CommandParams, PathParams, TestParams};
use super::{MAX_DIAGNOSTICS, MAX_OBSERVATION_BYTES, MAX_OBSERVATION_LINES};
use crate::agent::exec::{self, CommandSpec};
use crate::agent::output::{self, NO_OUTPUT};
use crate::config::CommandPolicy;
use crate::model::ToolCall;

impl Task {
    pub(super) async fn tool_diagnostics(&mut self, call: &ToolCall) -> Result<String, StopCause> {
        let p = match parse::<PathParams>(call) {
            Ok(p) => p,
            Err(err) => return Ok(format!("Error: {err}")),
        };
        let only = match p.path.as_deref().map(|rel| self.readable(rel)) {
            Some(Ok(path)) => Some(path),
            Some(Err(err)) => return Ok(format!("Error: {err}")),
            None => None,
        };
        let files: Vec<PathBuf> = match &only {
            Some(path) => vec![path.clone()],
            None => self.checked_files(),
        };
        let mut out = {
            let files_ref = &self.files;
            let read = |p: &Path| files_ref.text(p);
            let problems = super::super::check::syntax_problems(self.files.root(), &files, &read);
            if problems.is_empty() {
                format!("Syntax: no errors in {} file(s).\n", files.len())
            } else {
                format!("Syntax errors:\n{}\n", problems.join("\n"))
            }
        };
        if self.spec.checkers.is_empty() {
            out.push_str(
                "No checker (compiler, type checker, linter) is set up for this workspace.",
            );
            return Ok(out);
        }
        // The last verification's report stands while nothing changed.
        if self.dirty || self.last_checks.is_none() {
            let mut checked = self.checked_files();
            checked.extend(only.iter().cloned());
            let before = self.files.before_command().await;
            let report = {
                let settings = self.check_settings(None);
                super::super::check::run_checks(&settings, &checked, &self.cancel).await
            };
            let effects = self.files.after_command(before).await;
            if let Some(note) = self.command_effects(&effects, "The checker") {
                out.push_str(&format!("{}\n", prompt::defuse(&note)));
            }
            if self.cancel.is_cancelled() {
                return Err(StopCause::Cancelled);
            }
            self.last_checks = report;
        }
        if let Some(report) = &self.last_checks {
            let files_ref = &self.files;
            let read = |p: &Path| files_ref.text(p);
            out.push_str(&report.for_model(
                self.files.root(),
                only.as_deref(),
                MAX_DIAGNOSTICS,
                false,
                &read,
            ));
        }
        Ok(out)
    }

    pub(super) async fn tool_run_tests(&mut self, call: &ToolCall) -> Result<String, StopCause> {
        let p = match parse::<TestParams>(call) {
            Ok(p) => p,
            Err(err) => return Ok(format!("Error: {err}")),
        };
        let Some(command) = self.spec.test_command.clone() else {
            return Ok("No test command is configured or detected for this workspace.".to_owned());
        };
        let command = match p.filter.filter(|f| !f.trim().is_empty()) {
            Some(filter) => with_filter(&command, &filter),
            None => command,
        };
        let spec =
            super::super::check::test_spec(&self.check_settings(Some(&command)), command.clone());
        let (outcome, changes) = self.run_spec(&spec).await?;
        let report = crate::agent::verify::parse_test_output(&outcome.output, self.files.root());
        let mut out = format!(
            "`{command}`: {}\n",
            outcome.describe().lines().next().unwrap_or("")
        );
        out.push_str(&report.summary_for_model());
        out.push_str("\nOutput:\n");
        out.push_str(&if outcome.output.trim().is_empty() {
            NO_OUTPUT.to_owned()
        } else {
            output::head_tail(&outcome.output, 6 * 1024, 150)
        });
        if let Some(note) = changes {
            out.push_str(&format!("\n{note}\n"));
        }
        Ok(out)
    }

    pub(super) async fn tool_run_command(&mut self, call: &ToolCall) -> Result<String, StopCause> {
        let p = match parse::<CommandParams>(call) {
            Ok(p) => p,
            Err(err) => return Ok(format!("Error: {err}")),
        };
        let allowed = match self.spec.command_policy {
            CommandPolicy::Never => false,
            CommandPolicy::Auto => true,
            CommandPolicy::Ask => {
                let host = self.host.clone();
                tokio::select! {
                    () = self.cancel.cancelled() => return Err(StopCause::Cancelled),
                    ok = host.approve(&p.command) => ok,
                }
            }
        };
        if !allowed {
            return Ok(match self.spec.command_policy {
                CommandPolicy::Never => format!(
                    "Not run: `{}` — running commands is disabled (`agent.commands = \"never\"`). Use the other tools.",
                    p.command
                ),
                _ => format!("Not run: the user declined `{}`.", p.command),
            });
        }
        let spec = CommandSpec {
            command: p.command.clone(),
            cwd: self.files.root().to_path_buf(),
            timeout: self.spec.command_timeout,
            max_output_bytes: MAX_OBSERVATION_BYTES,
            max_output_lines: MAX_OBSERVATION_LINES,
            env_allow: self.spec.allow_env.clone(),
            limits: self.spec.limits,
            sandbox: self.spec.sandbox.clone(),
        };
        let (outcome, changes) = self.run_spec(&spec).await?;
        // The command may have changed files: verify again before judging.
        self.dirty = true;
        let mut out = outcome.describe();
        if let Some(note) = changes {
            out.push_str(&format!("\n{note}"));
        }
        Ok(out)
    }

    /// Runs a command, and takes what it changed in the workspace into the
    /// task; the second value says so for the model.
    async fn run_spec(
        &mut self,
        spec: &CommandSpec,
    ) -> Result<(exec::CommandOutcome, Option<String>), StopCause> {
        let before = self.files.before_command().await;
        let outcome = exec::run(spec, &self.cancel).await;
        // Even when cancelled: what it changed is undone with the rest.
        let effects = self.files.after_command(before).await;
        let changes = self.command_effects(&effects, "The command");
        if self.cancel.is_cancelled() {
            return Err(StopCause::Cancelled);
        }
        outcome
            .map(|o| (o, changes))
            .map_err(|err| StopCause::Error(format!("could not start `{}`: {err}", spec.command)))
    }
}

/// The test command narrowed to tests matching `filter`, in the runner's syntax.
fn with_filter(command: &str, filter: &str) -> String {
    let quoted = exec::shell_quote(filter);
    if command.contains("pytest") {
        format!("{command} -k {quoted}")
    } else if command.starts_with("go test") {
        format!("{command} -run {quoted}")
    } else if command.starts_with("npm") {
        format!("{command} -- --test-name-pattern={quoted}")
    } else {
        format!("{command} {quoted}")
    }
}

pub(super) fn file_uri(path: &Path) -> String {
    url::Url::from_file_path(path)
        .map(|u| u.to_string())
        .unwrap_or_else(|()| path.display().to_string())
}
